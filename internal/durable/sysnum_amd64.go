package durable

// sysSyncFileRange is sync_file_range(2)'s number (the syscall package
// does not name it).
const sysSyncFileRange = 277

// sysSyncfs is syncfs(2)'s number (not named by the syscall package on
// amd64).
const sysSyncfs = 306
