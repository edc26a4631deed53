import Foundation
import PinPolicy

/// What holds a local TCP port pinproxy could not listen on (EADDRINUSE), read from the kernel's
/// socket tables (`/proc/net/tcp`, `/proc/net/tcp6`), so that `start_failed`'s hint names the right
/// tool: a listening program (`ss -ltnp`), or a connection whose own end is that port — the kernel
/// hands outgoing connections local ports from its ephemeral range, so a listen port in that range
/// can be taken by any program's connection, and `ss -ltnp` shows nothing (`ss -tanp` does).
public enum PortHolder: Equatable, Sendable {
    case listener
    /// A connection in this TCP state (`ESTABLISHED`, `TIME_WAIT` …) has the port as its local end.
    case connection(state: String)
    /// Neither table shows it (another network namespace, or it went away meanwhile).
    case unknown

    /// Who holds `port` now.
    public static func holding(port: UInt16) -> PortHolder {
        // Read to EOF: a /proc file says it is empty, and its text comes a page per read.
        let tables = ["/proc/net/tcp", "/proc/net/tcp6"].compactMap { path in
            (try? PlainFile.contents(of: path, limit: 256 << 20)).map { String(decoding: $0, as: UTF8.self) }
        }
        return holding(port: port, tables: tables)
    }

    /// From the tables' text: a listener wins over a connection (either makes the bind fail), a
    /// live connection over one in TIME-WAIT.
    static func holding(port: UInt16, tables: [String]) -> PortHolder {
        var states: [String] = []
        for table in tables {
            // `sl local_address rem_address st …`: the local end is `HEXADDR:HEXPORT`, `st` a hex state.
            for line in table.split(separator: "\n").dropFirst() {
                let fields = line.split(separator: " ")
                guard fields.count > 3, let colon = fields[1].lastIndex(of: ":"),
                      UInt16(fields[1][fields[1].index(after: colon)...], radix: 16) == port else { continue }
                states.append(String(fields[3]))
            }
        }
        if states.contains("0A") { return .listener }
        // A live connection before a TIME-WAIT one: the kernel may hand a port still in TIME-WAIT
        // (toward one peer) to a new connection (toward another), and with SO_REUSEADDR only the
        // live one keeps pinproxy's bind from succeeding.
        guard let holder = states.first(where: { $0 != "06" }) ?? states.first else { return .unknown }
        return .connection(state: stateNames[holder] ?? "state 0x\(holder)")
    }

    /// The TCP states of include/net/tcp_states.h, as `ss` names them.
    private static let stateNames = [
        "01": "ESTABLISHED", "02": "SYN-SENT", "03": "SYN-RECV", "04": "FIN-WAIT-1", "05": "FIN-WAIT-2", "06": "TIME-WAIT",
        "07": "CLOSE", "08": "CLOSE-WAIT", "09": "LAST-ACK", "0B": "CLOSING", "0C": "NEW-SYN-RECV",
    ]

    /// `net.ipv4.ip_local_port_range` (it covers IPv6 too): where outgoing connections' local ports come from.
    public static func ephemeralRange() -> ClosedRange<UInt16>? {
        (try? PlainFile.contents(of: "/proc/sys/net/ipv4/ip_local_port_range", limit: 4096)).map { String(decoding: $0, as: UTF8.self) }.flatMap(parseRange)
    }

    static func parseRange(_ text: String) -> ClosedRange<UInt16>? {
        let bounds = text.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" }).compactMap { UInt16($0) }
        guard bounds.count == 2, bounds[0] <= bounds[1] else { return nil }
        return bounds[0]...bounds[1]
    }

    /// `start_failed`'s hint for `address`, which this holds.
    public func hint(for address: SocketAddress, ephemeral: ClosedRange<UInt16>?) -> String {
        let port = address.port
        let instead = "give pinproxy another address with --listen or proxy.listen"
        switch self {
        case .listener:
            return "another process listens on \(address) (ss -ltnp 'sport = :\(port)' names it): stop it, or \(instead)"
        case .connection(let state):
            let held = "no process listens on \(address), but a connection has its port as its own end (\(state); ss -tanp 'sport = :\(port)' names the program)"
            guard let ephemeral, ephemeral.contains(port) else { return "\(held): end it, or \(instead)" }
            return "\(held): \(port) is in the kernel's ephemeral range \(ephemeral.lowerBound)-\(ephemeral.upperBound) (net.ipv4.ip_local_port_range), "
                + "from which every outgoing connection takes its local port, so any program may hold it again; "
                + "give pinproxy a port outside that range with --listen or proxy.listen, or reserve this one (sysctl -w net.ipv4.ip_local_reserved_ports=\(port))"
        case .unknown:
            return "something holds \(address): ss -tanp 'sport = :\(port)' names it (a program listening there, or a connection whose own end it is): stop it, or \(instead)"
        }
    }
}
