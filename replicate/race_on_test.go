//go:build race

package replicate

// raceOn: under the race detector TestSIGKILLMidMultipart kills its child
// twice, not three times (each round uploads 7 MiB files in parts).
const raceOn = true
