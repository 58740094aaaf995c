package main

import (
	"errors"
	"strings"
)

// patternsValue is a repeatable flag of gitignore patterns (mount's
// --ignore), each one line's worth.
type patternsValue []string

func (v *patternsValue) String() string { return strings.Join(*v, " ") }

func (v *patternsValue) Set(s string) error {
	if strings.ContainsAny(s, "\n\r") {
		return errors.New("a pattern is one line")
	}
	if t := strings.TrimSpace(s); t == "" || t[0] == '#' {
		return errors.New("an empty pattern or a comment ignores nothing")
	}
	*v = append(*v, s)
	return nil
}

func (v *patternsValue) Get() any { return *v }
