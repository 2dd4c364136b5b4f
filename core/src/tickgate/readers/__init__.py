"""tickgate.readers"""
