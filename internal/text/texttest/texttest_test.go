package texttest

import (
	"strings"
	"testing"
)

func TestWideFenced(t *testing.T) {
	wide := strings.Repeat("x", FenceWidth+1)
	md := "prose " + wide + "\n\n```\nshort\n" + wide + "\n```\n\n" + wide + "\n\n````\n```\n" + wide + "é\n````\n"
	got := WideFenced(md)
	if len(got) != 2 || got[0] != wide || got[1] != wide+"é" {
		t.Errorf("WideFenced = %q, want the two fenced lines over %d characters", got, FenceWidth)
	}
	if got := WideFenced("```\n" + strings.Repeat("é", FenceWidth) + "\n```"); got != nil {
		t.Errorf("%d characters fit, in any bytes: %q", FenceWidth, got)
	}
}
