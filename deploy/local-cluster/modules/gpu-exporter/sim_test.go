package main

import (
	"testing"
	"time"
)

func TestSteadyValue(t *testing.T) {
	p, err := parseProfile("42", 100)
	if err != nil || p.at(0) != 42 || p.at(time.Hour) != 42 {
		t.Fatalf("got %v %v", p, err)
	}
}

func TestStepsCountFromTheStart(t *testing.T) {
	p, err := parseProfile("0:90,600:2", 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		at   time.Duration
		want float64
	}{{0, 90}, {599 * time.Second, 90}, {600 * time.Second, 2}, {time.Hour, 2}} {
		if got := p.at(c.at); got != c.want {
			t.Errorf("at %v: got %v, want %v", c.at, got, c.want)
		}
	}
}

func TestStepsInAnyOrderAndBeforeTheFirst(t *testing.T) {
	p, err := parseProfile("20:5, 10:90", 100)
	if err != nil {
		t.Fatal(err)
	}
	if p.at(0) != 90 || p.at(15*time.Second) != 90 || p.at(25*time.Second) != 5 {
		t.Fatalf("got %v", p)
	}
}

func TestStepsRepeatWithTheirPeriod(t *testing.T) {
	p, err := parseProfile("0:90,2:0/6", 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		at   time.Duration
		want float64
	}{{0, 90}, {1 * time.Second, 90}, {2 * time.Second, 0}, {5 * time.Second, 0}, {6 * time.Second, 90},
		{3*time.Hour + 1*time.Second, 90}, {3*time.Hour + 3*time.Second, 0}} {
		if got := p.at(c.at); got != c.want {
			t.Errorf("at %v: got %v, want %v", c.at, got, c.want)
		}
	}
}

func TestBadProfilesAreRefused(t *testing.T) {
	for _, text := range []string{"", "busy", "101", "-1", "0:90,x:2", "0-90", "10:", "0:90/0", "0:90/x",
		"0:90,6:0/6"} {
		if _, err := parseProfile(text, 100); err == nil {
			t.Errorf("%q: accepted", text)
		}
	}
}

func TestPerRankProfiles(t *testing.T) {
	r, err := parseRanked("rank0=90; rank2=0:50,10:5 ;*=1", 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		rank  int
		known bool
		at    time.Duration
		want  float64
	}{{0, true, 0, 90}, {1, true, 0, 1}, {2, true, 0, 50}, {2, true, 15 * time.Second, 5}, {7, true, 0, 1},
		{0, false, 0, 1}} { // a pod without a rank: "*"
		if got := r.of(c.rank, c.known).at(c.at); got != c.want {
			t.Errorf("rank %d (known %v) at %v: got %v, want %v", c.rank, c.known, c.at, got, c.want)
		}
	}
	if r, _ := parseRanked("rank0=90", 100); r.of(1, true) != nil || r.of(0, true).at(0) != 90 {
		t.Errorf("without *, another rank has no profile (the default applies): %v", r)
	}
	if r, _ := parseRanked("42", 100); r.of(3, true).at(0) != 42 || r.of(0, false).at(0) != 42 {
		t.Errorf("one profile is every rank's: %v", r)
	}
}

func TestBadPerRankProfilesAreRefused(t *testing.T) {
	for _, text := range []string{"rank0=", "rank=5", "rankx=5", "rank-1=5", "0=5", "rank0=90;rank0=1", "*=1;*=2",
		"rank0=90;", "rank0=101", "rank0:90", "rank0=90,*=1"} {
		if _, err := parseRanked(text, 100); err == nil {
			t.Errorf("%q: accepted", text)
		}
	}
}
