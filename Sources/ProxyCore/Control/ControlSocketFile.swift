import Foundation

/// The file of `proxy.control_socket`: bound at start with mode 0600 (only pinproxy's user and root
/// may connect: a lift is an operator's act), and removed at stop only while it is still the one
/// this process bound — a later pinproxy may have replaced it.
struct ControlSocketFile {
    let path: String
    private let device: UInt
    private let inode: UInt

    /// Binds a listening socket at `path` and returns it with its file. A socket file left by a
    /// process that is gone (a connect is refused) is replaced; a live one, or a file there that is
    /// not a socket, is an error naming it. The directory is made (0755, one level) when missing:
    /// the packaged unit's RuntimeDirectory= makes /run/pinproxy, a root run from a clone does not.
    static func bind(at path: String) throws(ControlServer.StartError) -> (file: ControlSocketFile, fd: Int32) {
        guard let address = UnixSocketAddress(path: path) else { throw .cannot(path, "the path does not fit a Unix socket address") }
        let directory = (path as NSString).deletingLastPathComponent
        if mkdir(directory, 0o755) != 0 && errno != EEXIST {
            throw .cannot(path, "cannot make its directory \(directory): \(errnoText(errno))")
        }
        try clearStale(path, address)
        let fd = unixStreamSocket(nonBlocking: true)
        guard fd >= 0 else { throw .cannot(path, "socket: \(errnoText(errno))") }
        // bind(2) creates the file with 0777 less the umask: 0177 makes it 0600 from its first
        // moment, with no window in which another user could connect. The umask is the process's,
        // set back at once; no other thread creates files during the start.
        let previous = umask(0o177)
        let bound = address.withSockaddr { Glibc.bind(fd, $0, $1) }
        let bindError = errno
        umask(previous)
        guard bound == 0 else {
            close(fd)
            throw .cannot(path, "bind: \(errnoText(bindError))")
        }
        var facts = stat()
        guard Glibc.listen(fd, 16) == 0, lstat(path, &facts) == 0 else {
            let why = errnoText(errno)
            close(fd)
            unlink(path)
            throw .cannot(path, why)
        }
        return (ControlSocketFile(path: path, device: UInt(facts.st_dev), inode: UInt(facts.st_ino)), fd)
    }

    /// Removes a socket file nobody serves; throws for a live socket or a file that is not a socket.
    private static func clearStale(_ path: String, _ address: UnixSocketAddress) throws(ControlServer.StartError) {
        var facts = stat()
        guard lstat(path, &facts) == 0 else {
            if errno == ENOENT { return }
            throw .cannot(path, errnoText(errno))
        }
        guard facts.st_mode & S_IFMT == S_IFSOCK else { throw .notASocket(path) }
        let probe = unixStreamSocket(nonBlocking: true)
        guard probe >= 0 else { throw .cannot(path, "socket: \(errnoText(errno))") }
        let connected = address.withSockaddr { connect(probe, $0, $1) }
        let connectError = errno
        close(probe)
        // EAGAIN: a live listener whose backlog is full.
        if connected == 0 || connectError == EAGAIN { throw .inUse(path) }
        guard connectError == ECONNREFUSED else { throw .cannot(path, "connect to the socket there: \(errnoText(connectError))") }
        guard unlink(path) == 0 || errno == ENOENT else { throw .cannot(path, "cannot remove the stale socket: \(errnoText(errno))") }
    }

    /// Unlinks the file if it is still the one `bind` made.
    func remove() {
        var facts = stat()
        guard lstat(path, &facts) == 0, UInt(facts.st_dev) == device, UInt(facts.st_ino) == inode else { return }
        unlink(path)
    }
}
