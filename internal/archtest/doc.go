// Package archtest holds tests of the module's shape: which package may
// import which (STYLE.md rules 1 and 2). It has no code of its own.
package archtest
