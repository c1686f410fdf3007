"""(being written this session: unit tests that kill the mutation survivors of bench/mutation.py)"""
