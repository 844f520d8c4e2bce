package lab

import (
	"strings"
	"testing"
)

func TestParseCPUTimes(t *testing.T) {
	in := "cpu  10 0 10 100 1 0 2 3 0 0\ncpu0 4 0 5 50 1 0 1 2 0 0\ncpu1 6 0 5 50 0 0 1 1 0 0\nintr 5\n"
	got, err := parseCPUTimes([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Steal != 2 || got[1].User != 6 || got.Total().Busy() != 22 || got.Total().Sum() != 126 {
		t.Fatalf("got %+v", got)
	}
	if _, err := parseCPUTimes([]byte("intr 5\n")); err == nil {
		t.Fatal("no cpuN lines: want an error")
	}
}

func TestEnvWrite(t *testing.T) {
	var b strings.Builder
	if err := (Env{}).Write(&b, "start"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"cpu: ", "cpu family: ", "cpu stepping: ", "cpu microcode: ", "mitigations: ", "load average at start", "steal at start"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("env.txt lacks %q:\n%s", want, b.String())
		}
	}
}
