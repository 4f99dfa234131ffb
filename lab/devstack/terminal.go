//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package devstack

import (
	"os"
	"os/signal"
	"syscall"
	"unsafe"
)

// HoldTerminal makes this process the foreground process group of its
// terminal while it runs there in the foreground, so that Ctrl-C reaches
// it and the processes it starts, and not the `make` and `go run` that
// started it: on SIGINT `go run` exits 1 and make kills itself with it,
// whatever this program then does. They exit with its status instead.
// Ctrl-Z is ignored meanwhile: it would stop this group while the shell
// waits on make, which stays running, and the terminal would hang.
// release gives the terminal back to the group that had it, before exit.
func HoldTerminal() (release func()) {
	nothing := func() {}
	tty, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if err != nil { // no controlling terminal
		return nothing
	}
	fg, err := tcgetpgrp(tty)
	own := syscall.Getpgrp()
	if err != nil || fg != own || own == os.Getpid() { // in the background, or the group already is this process
		tty.Close()
		return nothing
	}
	// A process outside the foreground group that sets it is sent SIGTTOU;
	// it stays ignored, so that a last error printed after release is not
	// stopped by a terminal set to tostop.
	signal.Ignore(syscall.SIGTTOU)
	if err := syscall.Setpgid(0, 0); err != nil {
		tty.Close()
		return nothing
	}
	if err := tcsetpgrp(tty, os.Getpid()); err != nil {
		_ = syscall.Setpgid(0, own)
		tty.Close()
		return nothing
	}
	signal.Ignore(syscall.SIGTSTP) // before any child starts: they inherit it
	return func() {
		_ = tcsetpgrp(tty, fg)
		tty.Close()
		signal.Reset(syscall.SIGTSTP)
	}
}

func tcgetpgrp(tty *os.File) (int, error) {
	var pgid int32
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, tty.Fd(), uintptr(syscall.TIOCGPGRP), uintptr(unsafe.Pointer(&pgid))); errno != 0 {
		return 0, errno
	}
	return int(pgid), nil
}

func tcsetpgrp(tty *os.File, pgid int) error {
	id := int32(pgid)
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, tty.Fd(), uintptr(syscall.TIOCSPGRP), uintptr(unsafe.Pointer(&id))); errno != 0 {
		return errno
	}
	return nil
}
