/// `pinproxy check`'s warnings about transparent mode (`proxy.transparent_listen`): settings that
/// load but would close every redirected connection, or let pinproxy's own connections loop.
extension Policy {
    func transparentWarnings() -> [LintWarning] {
        let transparent = proxy.transparent
        guard transparent.isOn else { return [] }
        var warnings: [LintWarning] = []
        // A local redirect keeps the client's source address: the host's (a pod's) own address, not loopback.
        let loopbackOnly = proxy.allowClients.entries.allSatisfy { $0.name == "loopback" || $0.name.hasPrefix("127.") || $0.name == "::1" || $0.name == "::1/128" }
        if !proxy.allowClientsExplicit || loopbackOnly {
            warnings.append(LintWarning(line: transparent.line, code: "transparent_clients_loopback_only", message:
                "connections redirected to proxy.transparent_listen come from this host's own addresses (a pod's IP, the host's interface addresses), not from loopback, and proxy.allow_clients allows loopback only: every one is closed at accept; list the host's addresses in allow_clients (e.g. [loopback, private])"))
        }
        // No warning without transparent_mark: exempting pinproxy's uid is as good (the pod rules do),
        // and the start check refuses rules that would loop.
        if !proxy.allowedPorts.contains(443) {
            warnings.append(LintWarning(line: transparent.line, code: "transparent_port_not_allowed", message:
                "proxy.allowed_ports does not allow 443: every redirected HTTPS connection to port 443 is refused (port_not_allowed)"))
        }
        return warnings
    }
}
