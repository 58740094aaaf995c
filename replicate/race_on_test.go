//go:build race

package replicate

// raceOn: under the race detector the keyed half of TestLargeBlobStreams
// seals a smaller file (sealing 24 MiB took 250 s there).
const raceOn = true
