import Foundation
@testable import PinPolicy

/// Made-up logs for the CT tests: a log's key is 40 bytes derived from `seed`, its id their SHA-256,
/// so the lists these build pass the loader's cross-check.
enum CTFake {
    static func key(_ seed: UInt8) -> [UInt8] { [0x30, 0x26, seed] + Array(repeating: seed, count: 37) }
    static func id(_ seed: UInt8) -> CTLogID { CTLogID(SHA256.hash(key(seed)))! }

    /// One `logs[]` (or `tiled_logs[]`) entry; `state` is the JSON of the state object.
    static func log(_ seed: UInt8, state: String = #"{"usable": {"timestamp": "2025-01-01T00:00:00Z"}}"#,
                    interval: String? = nil, tiled: Bool = false, extra: String = "") -> String {
        let endpoint = tiled
            ? #""submission_url": "https://log\#(seed).test/", "monitoring_url": "https://mon\#(seed).test/""#
            : #""url": "https://log\#(seed).test/""#
        let window = interval.map { #", "temporal_interval": \#($0)"# } ?? ""
        return #"{"description": "log \#(seed)", "log_id": "\#(id(seed))", "key": "\#(Base64.encode(key(seed)))", \#(endpoint), "mmd": 86400, "state": \#(state)\#(window)\#(extra)}"#
    }

    static func `operator`(_ name: String, logs: [String], tiled: [String] = []) -> String {
        #"{"name": "\#(name)", "email": ["ct@\#(name).test"], "logs": [\#(logs.joined(separator: ", "))], "tiled_logs": [\#(tiled.joined(separator: ", "))]}"#
    }

    static func list(_ operators: [String], timestamp: String = "2026-11-20T00:00:00Z") -> String {
        #"{"version": "1.0", "log_list_timestamp": "\#(timestamp)", "operators": [\#(operators.joined(separator: ", "))]}"#
    }

    static func state(_ name: String, _ timestamp: String) -> String { #"{"\#(name)": {"timestamp": "\#(timestamp)"}}"# }

    static func parse(_ text: String) throws(CTLogListError) -> CTLogList { try CTLogList.parse(Array(text.utf8), at: Date(), keyCheck: { _ in true }) }
}
