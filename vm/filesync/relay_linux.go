package filesync

// shareWatchOff is empty: on Linux, inotify watches a folder tree cheaply
// (one watch per folder).
const shareWatchOff = ""
