"""tickgate.importers"""
