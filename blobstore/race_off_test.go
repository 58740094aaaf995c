//go:build !race

package blobstore

const raceOn = false
