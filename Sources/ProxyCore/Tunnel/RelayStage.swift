import Foundation
import PinPolicy

/// Which relay carries a tunnel: the bufferevents while the stream check looks at it (or when it
/// ended before both sides were done), then the fast relay's method.
enum RelayStage: String, Sendable {
    case bufferevent, copy, splice

    /// `PINPROXY_TEST_RELAY=copy|splice` replaces `proxy.relay`, so the end-to-end suites can run
    /// with either method without new policy files. Debug builds only, like `TestFault`.
    static let testOverride: RelayMethod? = {
        #if DEBUG
        return ProcessInfo.processInfo.environment["PINPROXY_TEST_RELAY"].flatMap(RelayMethod.init(rawValue:))
        #else
        return nil
        #endif
    }()
}
