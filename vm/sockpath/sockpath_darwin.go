package sockpath

// sunPath is sizeof(sockaddr_un.sun_path) on macOS.
const sunPath = 104
