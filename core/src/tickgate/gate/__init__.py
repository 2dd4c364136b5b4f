"""tickgate.gate"""
