package main

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// A profile is what a pod's container env says its GPUs report: a steady value ("90") or
// steps counted from the pod's start ("0:90,600:2": 90 for ten minutes, then 2). Steps
// followed by "/SECONDS" repeat with that period ("0:90,2:0/6": 2 s at 90 every 6 s, for as
// long as the pod runs).
//
// The pods of one gang share their env, so a profile may also differ per rank:
// "rank0=90;*=1" (rank 0 at 90, every other rank at 1), each entry `rankN=PROFILE` or
// `*=PROFILE`, separated by ";". A pod's rank is its RANK env (what Volcano's pytorch
// plugin sets: the master 0, the workers 1, 2, ...), else its
// batch.kubernetes.io/job-completion-index annotation (an Indexed batch Job's pods); a pod
// whose rank no entry names, and no "*", gets the default.
type profile = *timeline

type timeline struct {
	steps []step
	every time.Duration // the period the steps repeat with; 0: they do not
}

type step struct {
	from  time.Duration
	value float64
}

// ranked is a profile per rank: byRank[N] for rank N, other ("*") for the rest (nil: none).
type ranked struct {
	byRank map[int]profile
	other  profile
}

// parseRanked reads GPU_SIM_UTIL / GPU_SIM_MEM_MIB, per rank or one profile for all.
func parseRanked(text string, max float64) (ranked, error) {
	if !strings.Contains(text, "=") {
		p, err := parseProfile(text, max)
		return ranked{other: p}, err
	}
	r := ranked{byRank: map[int]profile{}}
	for _, entry := range strings.Split(text, ";") {
		who, what, ok := strings.Cut(strings.TrimSpace(entry), "=")
		who = strings.TrimSpace(who)
		if !ok {
			return ranked{}, fmt.Errorf("%q is not rankN=PROFILE or *=PROFILE", entry)
		}
		p, err := parseProfile(what, max)
		if err != nil {
			return ranked{}, fmt.Errorf("%s: %w", who, err)
		}
		if who == "*" {
			if r.other != nil {
				return ranked{}, fmt.Errorf("* given twice")
			}
			r.other = p
			continue
		}
		n, err := strconv.Atoi(strings.TrimPrefix(who, "rank"))
		if !strings.HasPrefix(who, "rank") || err != nil || n < 0 {
			return ranked{}, fmt.Errorf("%q is not rankN (N from 0) or *", who)
		}
		if _, twice := r.byRank[n]; twice {
			return ranked{}, fmt.Errorf("%s given twice", who)
		}
		r.byRank[n] = p
	}
	return r, nil
}

// of is the profile for a pod of rank `rank` (known: whether the pod has one); nil when
// none applies (the default does).
func (r ranked) of(rank int, known bool) profile {
	if p, ok := r.byRank[rank]; ok && known {
		return p
	}
	return r.other
}

// parseProfile reads one profile. Values must be within [0, max].
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
		return &timeline{steps: []step{{0, v}}}, nil
	}
	p := &timeline{}
	if steps, period, repeats := strings.Cut(text, "/"); repeats {
		seconds, err := strconv.ParseFloat(strings.TrimSpace(period), 64)
		if err != nil || seconds <= 0 {
			return nil, fmt.Errorf("%q: %q is not a period in seconds above 0", text, period)
		}
		text, p.every = steps, time.Duration(seconds*float64(time.Second))
	}
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
		p.steps = append(p.steps, step{time.Duration(seconds * float64(time.Second)), v})
	}
	sort.SliceStable(p.steps, func(i, j int) bool { return p.steps[i].from < p.steps[j].from })
	if p.every > 0 && p.steps[len(p.steps)-1].from >= p.every {
		return nil, fmt.Errorf("%q: a step at or after the period", text)
	}
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
// (the first step's value before it begins), in the period's time for a repeating one.
func (p *timeline) at(elapsed time.Duration) float64 {
	if p.every > 0 {
		elapsed %= p.every
	}
	v := p.steps[0].value
	for _, s := range p.steps {
		if s.from > elapsed {
			break
		}
		v = s.value
	}
	return v
}
