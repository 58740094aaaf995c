//go:build !race

package replicate

const raceOn = false
