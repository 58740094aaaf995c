package durable

// sysSyncfs is syncfs(2)'s number (the syscall package does not name it).
const sysSyncfs = 306
