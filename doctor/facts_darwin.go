package doctor

// sunPathMax is sizeof(sockaddr_un.sun_path) on macOS.
const sunPathMax = 104
