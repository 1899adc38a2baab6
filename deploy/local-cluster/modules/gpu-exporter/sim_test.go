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

func TestBadProfilesAreRefused(t *testing.T) {
	for _, text := range []string{"", "busy", "101", "-1", "0:90,x:2", "0-90", "10:"} {
		if _, err := parseProfile(text, 100); err == nil {
			t.Errorf("%q: accepted", text)
		}
	}
}
