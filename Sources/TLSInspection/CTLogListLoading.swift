import Foundation
import PinPolicy

extension CTLogList {
    /// A list as the proxy judges with it: `parse`, with every log's key parsed by OpenSSL the way
    /// `SCTEntries.check` will use it, so a key that does not parse is an error naming its JSON path
    /// instead of a log whose SCTs silently never count.
    public static func load(_ json: [UInt8], at now: Date) throws(CTLogListError) -> CTLogList {
        try parse(json, at: now, keyCheck: { CTLogKey(spki: $0) != nil })
    }
}
