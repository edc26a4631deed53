import Foundation
import PinPolicy

// The proxy's own lines at start: the policy loaded, its warnings, the CT list, `started`.
extension Proxy {
    func logStarted() {
        let policy = snapshot.policy
        logger.emit(LogRecord(.info, "policy_loaded", policyFields(policy)))
        logLint(policy)
        logCTList()
        var fields: [(String, LogValue)] = [
            ("listen", .string(boundAddresses.map(\.description).joined(separator: ","))),
            ("rules", .int(policy.rules.count)), ("pinsets", .int(policy.pinsets.count)),
            ("unpinned", .string(policy.defaults.unpinned.rawValue)), ("trust", .string(policy.defaults.trust.description)),
            ("max_tunnels", .int(policy.proxy.maxTunnels)), ("debug_bypass", .string(bypassState(policy))),
            ("keylog", .string(keyLog.map { $0.settings.path } ?? "off")), ("workers", .int(workerCount)),
            ("metrics_listen", .string(metrics.map { $0.boundAddress.description } ?? "off")),
            ("control_socket", .string(control?.path ?? "off")),
        ]
        if !transparentAddresses.isEmpty { fields.append(("transparent_listen", .string(transparentAddresses.map(\.description).joined(separator: ",")))) }
        fields.append(("pid", .int(Int(getpid()))))
        fields.append(("version", .string(BuildInfo.version)))
        logger.emit(LogRecord(.info, "started", fields))
        if bypassState(policy) == "inert_without_flag" {
            logger.emit(LogRecord(.notice, "debug_bypass_inert", [
                ("detail", .string("the policy has a debug: section, but pinproxy runs without --debug-bypass, so it has no effect")),
            ]))
        }
        // The banner, repeated hourly by the rotation timer while the bypass lasts.
        if let banner = rotation.bypassBanner(policy, enabled: debugBypassEnabled) { logger.emit(banner) }
    }

    func bypassState(_ policy: Policy) -> String {
        guard let debug = policy.debug else { return debugBypassEnabled ? "flag_without_section" : "off" }
        if !debugBypassEnabled { return "inert_without_flag" }
        return debug.until > Date() ? "active" : "expired"
    }

    func policyFields(_ policy: Policy) -> [(String, LogValue)] {
        [("source", .string(policy.source)), ("rules", .int(policy.rules.count)), ("pinsets", .int(policy.pinsets.count)),
         ("deny", .int(policy.deny.count)), ("unpinned", .string(policy.defaults.unpinned.rawValue))]
    }

    func logCTList() {
        guard let book = snapshot.ct else { return }
        for line in ctListLog.loaded(book, at: rotation.clock.now()) { logger.emit(line) }
    }

    /// `check`'s warnings, one line each: the policy's, and the CT log list's but staleness, which
    /// has its own line (`ct_list_stale`, repeated daily).
    func logLint(_ policy: Policy) {
        let now = Date()
        let list = snapshot.ct.map { policy.lint($0.list, at: now).filter { $0.code != CTListWarning.stale(age: 0, maxAge: 0).code } } ?? []
        for warning in policy.lint(at: now) + list {
            logger.emit(LogRecord(.warning, "policy_warning", [("code", .string(warning.code)), ("rule_line", .int(warning.line)),
                                                                ("detail", .string(warning.message))]))
        }
    }
}
