//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package devstack

// HoldTerminal does nothing here: there are no process groups to move.
func HoldTerminal() (release func()) { return func() {} }
