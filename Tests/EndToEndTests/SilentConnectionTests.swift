import Foundation
import Testing
import TestSupport

/// Connections that never send a byte cost pinproxy as little as the kernel allows: the listener
/// defers them (TCP_DEFER_ACCEPT) and asks for the kernel's largest accept queue, and one that
/// ends without a byte is closed with a reset and no line of its own, only counted.
@Suite(.serialized) struct SilentConnectionTests {
    /// The listening socket defers accepting (TCP_DEFER_ACCEPT): a connection is handed to
    /// pinproxy with its first bytes, one that sends none only once the kernel gives up waiting (a
    /// second or more). Read off the proxy's own listening socket (a copy of its descriptor taken
    /// with pidfd_getfd), since when the kernel passes a silent connection on is its own affair.
    @Test func theListenerDefersSilentConnections() throws {
        let proxy = try ProxyProcess(config: policy(ports: [443]))
        if let seconds = try deferAcceptSeconds(of: proxy) {
            #expect(seconds == 1)
        } else {
            // No pidfd_getfd here (ptrace restricted: Yama, a container without CAP_SYS_PTRACE):
            // seen from outside instead. A silent connection waits in the kernel's SYN queue, where
            // `ss` shows it as SYN-RECV on the proxy's port, until the deferral's first SYN-ACK
            // retransmission, a second after its SYN.
            let quiet = try connectedSocket(port: proxy.port)
            defer { close(quiet) }
            let waiting = try run("/usr/bin/ss", ["-Htn", "state", "syn-recv", "sport = :\(proxy.port)"]).stdout
            #expect(waiting.split(separator: "\n").count == 1, "\(waiting)")
        }
        // A client that speaks at once is served as ever.
        let answer = try rawExchange(port: proxy.port, send: Array("CONNECT 127.0.0.1:1 HTTP/1.1\r\n\r\n".utf8), timeout: 10)
        #expect(statusLine(answer) == "HTTP/1.1 403 Forbidden by Pin Policy", "\(answer)")  // 1 is not in allowed_ports
    }

    /// The listening socket asks for the largest accept queue the kernel grants (net.core.somaxconn),
    /// not libevent's 128: `ss` shows a listener's queue limit as its Send-Q.
    @Test func theListenerHasTheKernelsLargestAcceptQueue() throws {
        let proxy = try ProxyProcess(config: policy(ports: [443]))
        let somaxconn = try #require(Int(String(contentsOfFile: "/proc/sys/net/core/somaxconn", encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)))
        let listening = try run("/usr/bin/ss", ["-Hltn", "sport = :\(proxy.port)"]).stdout
        let columns = listening.split(separator: " ", omittingEmptySubsequences: true)
        #expect(columns.count >= 3 && Int(columns[2]) == min(somaxconn, 65535), "\(listening)")
    }

    /// No line for a connection that asked for nothing. One that leaves without a byte is counted
    /// as it goes; one that stays silent past `header_timeout` gets no 408 (it began no request)
    /// but a reset, and is counted too. A head begun and left unfinished still gets its 408 and its
    /// `request_rejected` line.
    @Test func aConnectionThatNeverSpeaksIsClosedWithoutALine() throws {
        let proxy = try ProxyProcess(config: policy(ports: [443], proxy: "header_timeout: 300ms\nstats_interval: 100ms"))
        let leaver = try connectedSocket(port: proxy.port)
        close(leaver)
        let silent = try connectedSocket(port: proxy.port)
        defer { close(silent) }
        #expect(receiveError(silent, within: 20) == ECONNRESET)
        #expect(proxy.waitFor("stats") { $0["silent_closed"] == "2" } != nil)
        let begun = try rawExchange(port: proxy.port, send: Array("CONNECT api.pinproxy.test:443 HTTP/1.1\r\n".utf8), timeout: 10)
        #expect(statusLine(begun) == "HTTP/1.1 408 Request Timeout")
        #expect(proxy.waitFor("request_rejected")?.refusal == .network(.headerTimeout))
        #expect(proxy.events("request_rejected").count == 1)
        #expect(proxy.events("tunnel_closed").isEmpty)
        #expect(proxy.waitFor("stats") { $0["silent_closed"] == "2" && $0["rejected"] == "1" && $0["active_sessions"] == "0" } != nil)
    }

    /// The errno a blocking read ends with (0: an orderly close; -1: nothing within `seconds`).
    private func receiveError(_ fd: Int32, within seconds: Double) -> Int32 {
        var ready = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&ready, 1, Int32(seconds * 1000)) > 0 else { return -1 }
        var byte: UInt8 = 0
        return recv(fd, &byte, 1, 0) < 0 ? errno : 0
    }

    /// TCP_DEFER_ACCEPT of the proxy's listening socket: its inode from `ss`, its descriptor number
    /// from /proc, a copy of the descriptor through pidfd_open and pidfd_getfd (the test started
    /// the process), read by Python (Swift cannot call the variadic `syscall`).
    /// Nil where the kernel refuses the copy (EPERM).
    private func deferAcceptSeconds(of proxy: ProxyProcess) throws -> Int? {
        let pid = proxy.process.processIdentifier
        let listing = try run("/usr/bin/ss", ["-Hltne", "sport = :\(proxy.port)"]).stdout
        let inode = try #require(listing.split(separator: " ").first { $0.hasPrefix("ino:") }?.dropFirst(4), "\(listing)")
        let fds = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")
        let number = try #require(fds.first { (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\($0)")) == "socket:[\(inode)]" })
        let script = """
            import ctypes, os, socket, sys
            libc = ctypes.CDLL(None, use_errno=True)
            fd = libc.syscall(438, os.pidfd_open(int(sys.argv[1])), int(sys.argv[2]), 0)  # SYS_pidfd_getfd
            if fd < 0: sys.exit("pidfd_getfd: " + os.strerror(ctypes.get_errno()))
            print(socket.socket(fileno=fd).getsockopt(socket.IPPROTO_TCP, socket.TCP_DEFER_ACCEPT))
            """
        let result = try run("/usr/bin/env", ["python3", "-c", script, String(pid), number])
        if result.stderr.contains("pidfd_getfd: Operation not permitted") { return nil }
        return try #require(Int(result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)), "\(result.stdout)\(result.stderr)")
    }
}
