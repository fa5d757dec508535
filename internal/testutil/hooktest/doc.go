// Package hooktest holds a model with every GORM model hook and runs each
// store operation on it, so that every backend's tests can pin which
// operations run which hooks.
package hooktest
