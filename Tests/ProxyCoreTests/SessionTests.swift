import CLibevent
import Foundation
import PinPolicy
import TestSupport
import TLSInspection
import Testing
@testable import ProxyCore

/// A `Session` driven with a fake worker (`SessionHost`) and no socket: the test puts the client's
/// bytes in the session's input buffer and reads its answer from the output buffer, as
/// `KeyLogCheckTests` drives the key-log check with a fake source. What the fake records is what
/// the worker would have counted and logged.
@Suite struct SessionTests {
    final class FakeHost: SessionHost {
        let loop = EventLoop()
        let snapshot: PolicySnapshot
        var stopping = false
        let debugBypassEnabled = false
        lazy var resolver = Resolver(loop: loop, settings: snapshot.policy.proxy.dns, deadline: 1)
        lazy var tunnelServices = TunnelServices(loop: loop, debugBypassEnabled: false, keyLog: nil, quarantine: Quarantine(),
                                                 seenHellos: SeenHellos(), resumptions: ResumptionLedger())
        var slotsLeft = 1
        var reclaimable = false
        var ownAddress: SocketAddress?
        private let mirrorBudget = MirrorBudget(limit: 8)

        /// What the worker would have been told, in order.
        var told: [String] = []
        var ends: [SessionEnd] = []
        var removed = 0
        var objects = 0

        init(policy yaml: String) throws {
            let policy = try PolicyLoader.load(yaml: yaml, source: "test.yaml", pinFiles: nil)
            snapshot = try PolicySnapshot(policy: policy, systemStore: .anchors([], name: "none"))
        }

        func takeTunnelSlot() -> Bool {
            guard slotsLeft > 0 else { return false }
            slotsLeft -= 1
            return true
        }
        func reclaimTunnelSlot() -> Bool {
            told.append("reclaim")
            return reclaimable
        }
        func takeTunnelSlotUnchecked() { slotsLeft -= 1 }
        func giveBackTunnelSlot() { slotsLeft += 1 }
        func reserveMirrors(_ count: Int, for client: SocketAddress) -> Refusal? { nil }
        func mirrorTicket(for client: SocketAddress) -> MirrorBudget.Ticket { mirrorBudget.take(for: SilentConnections.Client(client.ip)) }
        func sessionObjectMade() { objects += 1 }
        func sessionObjectFreed() { objects -= 1 }
        func spoke(_ id: Int) { told.append("spoke") }
        func awaitsHello(_ id: Int, client: SocketAddress, descriptors: Int) { told.append("awaitsHello") }
        func remove(_ session: Session) { removed += 1 }
        func isOwnAddress(_ address: SocketAddress) -> Bool { address == ownAddress }
        func probe(_ key: ProbeHub.Key, settings: ProxySettings, cacheable: Bool, _ callback: @escaping (ProbeResult) -> Void) -> ProbeHub.Waiter {
            told.append("probe")
            return ProbeHub.Waiter()
        }
        func forgetProbe(_ authority: Authority) { told.append("forgetProbe") }
        func confirm(_ confirmation: StreamCheck.Confirmation, dialling addresses: [SocketAddress], hop: ParentHop?, connectTimeout: Double,
                     timeout: Double, record: DecisionRecord) {}
        func forwarder(conn: Int, client: SocketAddress, side: BufferEvent, onEnd: @escaping (PlainForwarder.End) -> Void) -> PlainForwarder? {
            told.append("forward")
            return nil
        }
        func noteWarnings(_ evaluation: Evaluation, record: DecisionRecord) { told.append("warnings") }
        func logStreamNote(_ note: StreamCheck.Note, record: DecisionRecord) {}
        func countOpened(_ decision: TunnelDecision) { told.append("opened") }
        func logOpened(_ record: DecisionRecord, _ decision: TunnelDecision) {}
        func ended(_ end: SessionEnd) {
            told.append("ended")
            ends.append(end)
        }
        func closedSilently() { told.append("silent") }
    }

    static let policy = """
        version: 1
        proxy: { allowed_ports: [443], max_request_bytes: 256, dns: { nameservers: [], hosts_file: none } }
        defaults: { unpinned: allow, require_backup: off }
        rules:
          - host: denied.test
            mode: unpinned
        """

    static let client = SocketAddress(ip: IPAddress("127.0.0.1")!, port: 40000)

    /// A session on no socket (fd -1: libevent buffers without a descriptor), fed `bytes`.
    static func drive(_ bytes: [UInt8], host: FakeHost) -> (Session, answer: String) {
        let session = Session(worker: host, id: 1, fd: -1, client: client)!
        let side = session.clientSide!
        // A socket bufferevent's input takes bytes only from its socket: thawed for the test's.
        evbuffer_unfreeze(side.input, 0)
        evbuffer_add(side.input, bytes, bytes.count)
        evbuffer_freeze(side.input, 0)
        session.onReadable()
        return (session, written(to: session.clientSide))
    }

    /// A session whose client connected and has not sent a byte (fd -1: nothing waits in a kernel).
    static func connected(host: FakeHost) -> Session {
        Session(worker: host, id: 1, fd: -1, client: client)!
    }

    /// What the session has written for its client and not yet sent (no socket takes it).
    static func written(to side: BufferEvent?) -> String {
        guard let output = side?.output else { return "" }
        let length = evbuffer_get_length(output)
        var answer = [UInt8](repeating: 0, count: length)
        if length > 0 {
            evbuffer_unfreeze(output, 1)  // a socket bufferevent's output gives bytes only to its socket
            evbuffer_copyout(output, &answer, length)
            evbuffer_freeze(output, 1)
        }
        return String(decoding: answer, as: UTF8.self)
    }

    struct Case: CustomTestStringConvertible, Sendable {
        let name: String
        let request: [UInt8]
        var stopping = false
        var slots = 1
        /// The line's `reason`, and the answer's status line.
        let reason: String
        let status: String?
        var testDescription: String { name }
    }

    static let refusals: [Case] = [
        Case(name: "a target without a port", request: Array("CONNECT example.test HTTP/1.1\r\n\r\n".utf8), reason: "bad_request",
             status: "HTTP/1.1 400 Bad Request"),
        Case(name: "a CONNECT in another HTTP version", request: Array("CONNECT a.test:443 HTTP/2.0\r\n\r\n".utf8), reason: "bad_request",
             status: "HTTP/1.1 400 Bad Request"),
        Case(name: "a head over max_request_bytes", request: Array(("CONNECT a.test:443 HTTP/1.1\r\nX: " + String(repeating: "x", count: 300) + "\r\n\r\n").utf8),
             reason: "request_too_large", status: "HTTP/1.1 431 Request Header Fields Too Large"),
        Case(name: "TLS spoken to the proxy", request: [0x16, 0x03, 0x01, 0x00, 0x05], reason: "tls_to_proxy", status: nil),
        Case(name: "a port outside allowed_ports", request: Array("CONNECT a.test:8443 HTTP/1.1\r\n\r\n".utf8), reason: "port_not_allowed",
             status: "HTTP/1.1 403 Forbidden by Pin Policy"),
        Case(name: "a CONNECT while stopping", request: Array("CONNECT a.test:443 HTTP/1.1\r\n\r\n".utf8), stopping: true,
             reason: "shutting_down", status: "HTTP/1.1 503 Shutting Down"),
        Case(name: "no max_tunnels slot left", request: Array("CONNECT a.test:443 HTTP/1.1\r\n\r\n".utf8), slots: 0,
             reason: "connection_limit_reached", status: "HTTP/1.1 503 Too Many Tunnels"),
    ]

    @Test(arguments: refusals)
    func aRefusedRequestIsLoggedOnceAndAnswered(_ c: Case) throws {
        let host = try FakeHost(policy: Self.policy)
        host.stopping = c.stopping
        host.slotsLeft = c.slots
        let (session, answer) = Self.drive(c.request, host: host)
        #expect(host.ends.count == 1)
        let reason: String? = switch host.ends.first {
        case .rejected(let refusal, _)?, .refused(let refusal, _)?: refusal.reason
        default: nil
        }
        #expect(reason == c.reason)
        if let status = c.status {
            #expect(answer.hasPrefix(status + "\r\n"), "\(answer)")
            #expect(answer.contains("Proxy-Status: pinproxy; error="))
        } else {
            #expect(!answer.hasPrefix("HTTP/"))  // the client's own protocol's answer
        }
        #expect(!host.told.contains("probe"))
        #expect(host.slotsLeft == c.slots, "a refused CONNECT holds no max_tunnels slot")
        session.release()
        #expect(host.removed == 1)
    }

    @Test func aCONNECTForAPinnedHostAsksTheProbeAndHoldsASlotUntilItEnds() throws {
        let yaml = Self.policy + "\n  - host: pinned.test\n    pins: [\"\(Pins.intermediate)\"]\nresolve: { pinned.test: 192.0.2.1 }\n"
        let host = try FakeHost(policy: yaml)
        let (session, answer) = Self.drive(Array("CONNECT pinned.test:443 HTTP/1.1\r\n\r\n".utf8), host: host)
        #expect(answer.isEmpty)
        #expect(host.told == ["spoke", "probe"])
        #expect(host.slotsLeft == 0)
        session.finish(.clientClosed)
        #expect(host.slotsLeft == 1, "the slot goes back when the session ends")
        #expect(host.ends.count == 1)
        #expect(host.removed == 1)
    }

    @Test func anIncompleteHeadWaitsAndSaysNothing() throws {
        let host = try FakeHost(policy: Self.policy)
        let (session, answer) = Self.drive(Array("CONNECT a.test:443 HTTP/1.1\r\n".utf8), host: host)
        #expect(answer.isEmpty)
        #expect(host.told.isEmpty)
        #expect(session.isReadingRequest)
        session.finish(.shutdown)
        #expect(host.removed == 1)
    }

    @Test func theObjectCountIsBalanced() throws {
        let host = try FakeHost(policy: Self.policy)
        do {
            let (session, _) = Self.drive(Array("CONNECT a.test:8443 HTTP/1.1\r\n\r\n".utf8), host: host)
            session.release()
        }
        #expect(host.objects == 0)
    }

    // MARK: the silent path: a client that never sent a byte has no line of its own

    /// The first line of a CONNECT, its head not finished: a client that has begun a request.
    static let partialHead = "CONNECT a.test:443 HTTP/1.1\r\n"

    /// A hang-up, a transport error or `header_timeout` before a single byte is a connection that
    /// never asked for anything (HAProxy's `dontlognull`): counted in `silent_closed`, no line, no
    /// answer. A line for each would let a flood of empty connections fill the log.
    @Test(arguments: [CloseReason.clientClosed, .clientError, .silent])
    func aClientThatSentNothingEndsSilently(_ reason: CloseReason) throws {
        let host = try FakeHost(policy: Self.policy)
        do {
            let session = Self.connected(host: host)
            let side = session.clientSide  // kept to read what was written after the session lets go of it
            session.finish(reason)
            #expect(host.told == ["silent"])
            #expect(host.ends.isEmpty)
            #expect(Self.written(to: side) == "")
            #expect(session.clientSide == nil)
            #expect(!session.isReadingRequest)
            #expect(host.removed == 1)
        }
        #expect(host.objects == 0)
    }

    /// A session reaped in a flood has no line and is not a `silent_closed`: the worker counts and
    /// summarises the reaped itself (`silent_reaped`), whether the client had sent part of a head
    /// or nothing.
    @Test(arguments: ["", partialHead])
    func aReapedSessionHasNoLineAndIsNotCountedSilent(_ sent: String) throws {
        let host = try FakeHost(policy: Self.policy)
        do {
            let (session, answer) = Self.drive(Array(sent.utf8), host: host)
            #expect(answer == "")
            let side = session.clientSide
            session.reap()
            #expect(host.told.isEmpty)
            #expect(host.ends.isEmpty)
            #expect(Self.written(to: side) == "")
            #expect(host.removed == 1)
        }
        #expect(host.objects == 0)
    }

    /// `header_timeout` with not a byte sent: closed as silent, without the 408 a client that began
    /// a request gets (nobody is waiting to read it). The timer's callback is called directly.
    @Test func aHeaderTimeoutWithNothingSentClosesWithoutA408() throws {
        let host = try FakeHost(policy: Self.policy)
        do {
            let session = Self.connected(host: host)
            let side = session.clientSide
            session.headerTimedOut()
            #expect(Self.written(to: side) == "")
            #expect(host.told == ["silent"])
            #expect(host.ends.isEmpty)
            #expect(session.clientSide == nil)
            #expect(host.removed == 1)
        }
        #expect(host.objects == 0)
    }

    /// `header_timeout` after part of a head: the client began a request, so it is answered 408 and
    /// logged as `request_rejected` with reason `header_timeout`, and is not counted silent.
    @Test func aHeaderTimeoutAfterAPartialHeadAnswers408() throws {
        let host = try FakeHost(policy: Self.policy)
        do {
            let (session, answer) = Self.drive(Array(Self.partialHead.utf8), host: host)
            #expect(answer == "")
            session.headerTimedOut()
            let body = "pinproxy refused the request: header_timeout (the request head did not arrive in time)\n"
            #expect(Self.written(to: session.clientSide) == "HTTP/1.1 408 Request Timeout\r\n"
                + "Proxy-Status: pinproxy; error=http_request_error; details=\"header_timeout\"\r\n"
                + "Content-Type: text/plain; charset=utf-8\r\nContent-Length: 87\r\nConnection: close\r\n\r\n" + body)
            #expect(body.utf8.count == 87)
            #expect(host.told == ["ended"])
            #expect(host.ends.count == 1)
            guard case .rejected(let refusal, let record)? = host.ends.first else {
                Issue.record("expected request_rejected, got \(host.ends)")
                return
            }
            #expect(refusal.code == .network(.headerTimeout))
            #expect(refusal.reason == "header_timeout")
            #expect(refusal.status == 408)
            guard case .requested = record.stage else {
                Issue.record("expected a record of a request not read, got \(record.stage)")
                return
            }
            #expect(SessionLog.end(host.ends[0]).event == "request_rejected")
            #expect(host.removed == 0, "it lingers while the 408 goes out")
            session.release()
            #expect(host.removed == 1)
        }
        #expect(host.objects == 0)
    }

    /// A hang-up (EOF, or an error) after part of a head is a client that asked for something and
    /// left: it has its `tunnel_closed` line, close_reason `…_before_decision`, and is not silent.
    @Test(arguments: [(Int16(BEV_EVENT_READING | BEV_EVENT_EOF), CloseReason.clientClosed, "client_closed_before_decision"),
                      (Int16(BEV_EVENT_READING | BEV_EVENT_ERROR), CloseReason.clientError, "client_error_before_decision")])
    func aHangUpAfterAPartialHeadHasATunnelClosedLine(_ event: Int16, _ reason: CloseReason, _ closeReason: String) throws {
        let host = try FakeHost(policy: Self.policy)
        do {
            let (session, answer) = Self.drive(Array(Self.partialHead.utf8), host: host)
            #expect(answer == "")
            let side = session.clientSide
            session.onEvent(event)
            #expect(Self.written(to: side) == "")
            #expect(host.told == ["ended"])
            #expect(host.ends.count == 1)
            guard case .closed(let ended, let closed)? = host.ends.first else {
                Issue.record("expected tunnel_closed, got \(host.ends)")
                return
            }
            #expect(ended == reason)
            #expect(closed.passage == nil)
            #expect(closed.bytesUp == 0 && closed.bytesDown == 0)
            guard case .requested = closed.record.stage else {
                Issue.record("expected a record of a request not read, got \(closed.record.stage)")
                return
            }
            let line = SessionLog.end(host.ends[0])
            #expect(line.event == "tunnel_closed")
            guard case .string(let logged)? = line["close_reason"] else {
                Issue.record("no close_reason in \(line.fields)")
                return
            }
            #expect(logged == closeReason)
            #expect(host.removed == 1)
        }
        #expect(host.objects == 0)
    }
}
