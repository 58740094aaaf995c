package testsupport

import (
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"
)

// SeedEnv names the variable that replays a seeded test.
const SeedEnv = "ZEROFS_SEED"

// Seed returns the seed for t's random choices: $ZEROFS_SEED if set, else a
// fresh one. It logs the seed and how to replay it, so that a failing run's
// output says how to run it again.
func Seed(t testing.TB) uint64 {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(SeedEnv); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", SeedEnv, s, err)
		}
		seed = n
	}
	t.Logf("seed %d (replay: %s=%d go test -run '^%s$')", seed, SeedEnv, seed, t.Name())
	return seed
}

// Rand returns a generator seeded by Seed(t).
func Rand(t testing.TB) *rand.Rand {
	t.Helper()
	return NewRand(Seed(t))
}

// NewRand returns the generator for seed: the same seed, the same choices.
func NewRand(seed uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}
