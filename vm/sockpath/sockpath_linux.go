package sockpath

// sunPath is sizeof(sockaddr_un.sun_path) on Linux.
const sunPath = 108
