//go:build race

package blobstore

// raceOn: the race detector slows the chunker's byte loop tenfold, so the
// suite's largest contents shrink (they still cross ChunkAbove).
const raceOn = true
