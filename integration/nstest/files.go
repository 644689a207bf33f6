package nstest

import (
	"errors"
	"fmt"
	"io"
	"os"
	"testing"
)

// copyFile copies src to a new file dst with mode.
func copyFile(dst, src string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// worldReadableDir creates a temporary directory with mode 0755, so that
// unprivileged processes can read what root puts there.
func worldReadableDir(pattern string) (string, error) {
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		return "", fmt.Errorf("create temp dir: %w", err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", errors.Join(fmt.Errorf("chmod %s: %w", dir, err), os.RemoveAll(dir))
	}
	return dir, nil
}

// SharedDir is a temporary directory every user can read and traverse
// (mode 0755), so that unprivileged processes can read what root puts
// there; it is removed at t's cleanup. pattern is os.MkdirTemp's.
func SharedDir(t testing.TB, pattern string) string {
	t.Helper()
	dir, err := worldReadableDir(pattern)
	if err != nil {
		t.Fatalf("nstest: %v", err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("nstest: remove %s: %v", dir, err)
		}
	})
	return dir
}
