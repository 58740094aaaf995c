package main

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// durationValue is a flag holding a duration as people write one: Go's
// forms (90m, 12h, 1h30m) plus days and weeks (7d, 2w, 1d12h), printed
// back the same way ("7d", never "168h0m0s").
type durationValue struct{ d *time.Duration }

func (v durationValue) Set(s string) error {
	d, err := parseDuration(s)
	if err != nil {
		return err
	}
	*v.d = d
	return nil
}

func (v durationValue) String() string {
	if v.d == nil {
		return "0"
	}
	return formatDuration(*v.d)
}

var dayWeekRE = regexp.MustCompile(`^([0-9]+(?:\.[0-9]+)?)([dw])`)

// parseDuration reads "7d", "2w", "1d12h", "36h", "90m" or "0".
func parseDuration(s string) (time.Duration, error) {
	bad := fmt.Errorf("bad duration %q: want a number with a unit, like 30m, 12h, 7d or 2w", s)
	var total time.Duration
	rest := strings.TrimSpace(s)
	if rest == "" {
		return 0, bad
	}
	for {
		m := dayWeekRE.FindStringSubmatch(rest)
		if m == nil {
			break
		}
		n, err := strconv.ParseFloat(m[1], 64)
		if err != nil {
			return 0, bad
		}
		unit := 24 * time.Hour
		if m[2] == "w" {
			unit *= 7
		}
		total += time.Duration(n * float64(unit))
		rest = rest[len(m[0]):]
	}
	if rest != "" {
		d, err := time.ParseDuration(rest)
		if err != nil {
			return 0, bad
		}
		total += d
	}
	return total, nil
}

// formatDuration writes d as people do: "7d", "1d12h", "36m", "1h30m",
// "0" (whole days as days; no trailing zero units).
func formatDuration(d time.Duration) string {
	if d == 0 {
		return "0"
	}
	sign := ""
	if d < 0 {
		sign, d = "-", -d
	}
	day := 24 * time.Hour
	s := ""
	if d >= day {
		s = fmt.Sprintf("%dd", d/day)
		d %= day
	}
	if d > 0 {
		r := d.String() // "1h30m0s", "12h0m0s", "5m0s", "45s"
		if strings.HasSuffix(r, "m0s") {
			r = strings.TrimSuffix(r, "0s")
		}
		if strings.HasSuffix(r, "h0m") {
			r = strings.TrimSuffix(r, "0m")
		}
		s += r
	}
	return sign + s
}

func (v durationValue) Get() any { return *v.d }
