import Foundation
import Yams

/// The `defaults:` section.
extension PolicyReader {
    func readDefaults(_ node: Node) -> PolicyDefaults? {
        guard let f = fields(node, "defaults", allowed: .defaults) else { return nil }
        guard let u = f["unpinned"] else {
            fail(node, "defaults.unpinned is required: 'allow' (tunnel hosts no rule matches, unverified) or 'deny' (refuse them)")
            return nil
        }
        guard let unpinned = choice(u, "defaults.unpinned", UnpinnedDecision.self, options: [.allow, .deny]) else { return nil }
        var defaults = PolicyDefaults(unpinned: unpinned)
        if let n = f["trust"], let trust = trust(n, "defaults.trust") { defaults.trust = trust }
        if let n = f["require_backup"],
           let v = choice(n, "defaults.require_backup", BackupRequirement.self, options: [.warn, .error, .off]) {
            defaults.requireBackup = v
        }
        if let n = f["require_keylog"], let v = boolean(n, "defaults.require_keylog") { defaults.requireKeylog = v }
        if let n = f["quarantine"], let v = quarantine(n, "defaults.quarantine") { defaults.quarantine = v }
        if let n = f["mirror_checks"], let v = integer(n, "defaults.mirror_checks", in: 0...4) { defaults.mirrorChecks = v }
        if let n = f["ct"], let v = ctMode(n, "defaults.ct") { defaults.ct = v }
        return defaults
    }

    func ctMode(_ node: Node, _ what: String) -> CTMode? {
        choice(node, what, CTMode.self, options: [.off, .report, .require])
    }

    /// A quarantine's length: a duration from 0s (off) to 7 days.
    func quarantine(_ node: Node, _ what: String) -> TimeInterval? {
        guard let seconds = duration(node, what) else { return nil }
        guard seconds <= 7 * 24 * 3600 else {
            fail(node, "\(what) is at most 7d (168h): a quarantine outlasting that hides the incident instead of drawing attention to it; write 0s to turn it off")
            return nil
        }
        return seconds
    }

    func trust(_ node: Node, _ what: String) -> Trust? {
        guard let text = string(node, what) else { return nil }
        switch text {
        case "system": return .system
        case "pins-only": return .pinsOnly
        default:
            if text.hasPrefix("ca-file:"), text.count > 8 {
                let file = path(String(text.dropFirst(8)))
                guard FileManager.default.isReadableFile(atPath: file) else {
                    fail(node, "\(what): the CA file '\(file)' cannot be read")
                    return nil
                }
                return .caFile(path: file)
            }
            fail(node, "\(what) must be system, pins-only or ca-file:/path/to/bundle.pem, not '\(text)'")
            return nil
        }
    }
}
