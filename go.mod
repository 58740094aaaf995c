module github.com/zerofs/zerofs

go 1.26.8

require (
	github.com/aymanbagabas/go-udiff v0.4.2
	github.com/google/uuid v1.6.0
	github.com/hanwen/go-fuse/v2 v2.12.1
	golang.org/x/sys v0.50.0
	pgregory.net/rapid v1.3.0
)
