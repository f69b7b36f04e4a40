package doctor

// sunPathMax is sizeof(sockaddr_un.sun_path) on Linux.
const sunPathMax = 108
