//go:build !darwin && !linux

package sockpath

// sunPath is sizeof(sockaddr_un.sun_path) on the BSDs, macOS's heritage.
const sunPath = 104
