package main

// macOSVersion is empty: this is not a Mac.
func macOSVersion() string { return "" }
