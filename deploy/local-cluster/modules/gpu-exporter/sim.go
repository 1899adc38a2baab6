package main

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// A profile is what a pod's container env says its GPUs report: a steady value ("90") or
// steps counted from the pod's start ("0:90,600:2": 90 for ten minutes, then 2).
type profile []step

type step struct {
	from  time.Duration
	value float64
}

// parseProfile reads GPU_SIM_UTIL / GPU_SIM_MEM_MIB. Values must be within [0, max].
func parseProfile(text string, max float64) (profile, error) {
	text = strings.TrimSpace(text)
	if text == "" {
		return nil, fmt.Errorf("empty")
	}
	if !strings.Contains(text, ":") {
		v, err := value(text, max)
		if err != nil {
			return nil, err
		}
		return profile{{0, v}}, nil
	}
	var p profile
	for _, part := range strings.Split(text, ",") {
		at, val, ok := strings.Cut(strings.TrimSpace(part), ":")
		if !ok {
			return nil, fmt.Errorf("%q is not SECONDS:VALUE", part)
		}
		seconds, err := strconv.ParseFloat(strings.TrimSpace(at), 64)
		if err != nil || seconds < 0 {
			return nil, fmt.Errorf("%q: %q is not a number of seconds", part, at)
		}
		v, err := value(val, max)
		if err != nil {
			return nil, err
		}
		p = append(p, step{time.Duration(seconds * float64(time.Second)), v})
	}
	sort.SliceStable(p, func(i, j int) bool { return p[i].from < p[j].from })
	return p, nil
}

func value(text string, max float64) (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimSpace(text), 64)
	if err != nil || v < 0 || v > max {
		return 0, fmt.Errorf("%q is not a number from 0 to %g", text, max)
	}
	return v, nil
}

// at is the profile's value `elapsed` after the pod started: the last step begun by then
// (the first step's value before it begins).
func (p profile) at(elapsed time.Duration) float64 {
	v := p[0].value
	for _, s := range p {
		if s.from > elapsed {
			break
		}
		v = s.value
	}
	return v
}
