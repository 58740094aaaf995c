package durable

// sysSyncFileRange is sync_file_range(2)'s number (the syscall package
// does not name it).
const sysSyncFileRange = 84

// sysSyncfs is syncfs(2)'s number.
const sysSyncfs = 267
