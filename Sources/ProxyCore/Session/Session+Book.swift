import CLibevent

/// What the worker's books ask of a session: whether it is silent and how, and closing it to make
/// room in a flood.
extension Session {
    /// Still waiting for its (next) request head (shutdown closes these at once).
    var isReadingRequest: Bool {
        if case .readingRequest = machine.state { return true }
        if case .forwarding(let forwarder) = work { return forwarder.isBetweenRequests }  // kept alive, nothing in flight
        return false
    }

    /// A pinned tunnel whose client has not completed its ClientHello since its `200`.
    var awaitsClientHello: Bool { work.relay?.check?.awaitsClientHello == true }

    /// What this connection is doing while it has not spoken (see `SilentConnections.Activity`):
    /// bytes in the kernel that the loop has not read yet are arriving (maybe a real client's
    /// CONNECT); part of a head already read is trickling; nothing, or a refusal lingering, is idle.
    var silentActivity: SilentConnections.Activity {
        if case .lingering = machine.state { return .answered }
        if let relay = work.relay { return relay.clientActivity }
        guard isReadingRequest, let clientSide else { return .idle }  // its first head, or the next on a kept connection
        var byte: UInt8 = 0
        if recv(clientSide.fd, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT)) > 0 { return .arriving }
        return evbuffer_get_length(clientSide.input) > 0 ? .trickling : .idle
    }

    /// Closes a silent connection to make room in a flood, whatever it is doing: one that is
    /// writing an answer (a 408, a TLS alert for a TLS-speaking client) is closed too, or a flood of
    /// one-byte connections would keep every descriptor for its answers' linger.
    func reap() {
        if case .lingering = machine.state { return release() }
        // A tunnel logged its decision: it says how it ended.
        if case .relaying = machine.state { return finish(.reclaimed) }
        finish(.reaped)
    }
}
