package ui

// SetSearchScan sets the bound of a schedule search's read for one test
// and returns the function that restores it.
func SetSearchScan(n int) (restore func()) {
	old := searchScan
	searchScan = n
	return func() { searchScan = old }
}
