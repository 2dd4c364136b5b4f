"""tickgate.admission"""
