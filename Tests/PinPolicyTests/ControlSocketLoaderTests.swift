import Foundation
import Testing
@testable import PinPolicy

/// `proxy.control_socket`: absent by default (no control socket), an absolute path that is not a
/// directory and fits a Unix socket address; anything else a load error at its place.
@Suite struct ControlSocketLoaderTests {
    @Test func absentByDefault() throws {
        #expect(try load(header).get().proxy.controlSocket == nil)
    }

    @Test func anAbsolutePathLoads() throws {
        let loaded = try load(header + "proxy:\n  control_socket: /run/pinproxy/control.sock\n").get()
        #expect(loaded.proxy.controlSocket == "/run/pinproxy/control.sock")
    }

    @Test func aRelativePathIsALoadErrorAtItsPlace() {
        expectError(header + "proxy:\n  control_socket: run/control.sock\n", line: 5, column: 19,
                    "proxy.control_socket must be an absolute path, e.g. /run/pinproxy/control.sock, not 'run/control.sock'")
    }

    @Test func aValueOfAnotherTypeIsALoadError() {
        expectError(header + "proxy:\n  control_socket: [/run/pinproxy/control.sock]\n", line: 5, column: 19, "single value")
        expectError(header + "proxy:\n  control_socket: { path: /run/pinproxy/control.sock }\n", line: 5, column: 19, "single value")
    }

    @Test func aDirectoryIsALoadError() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("control-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        expectError(header + "proxy:\n  control_socket: \(directory)\n", line: 5, column: 19,
                    "proxy.control_socket \(directory) is a directory; name the socket file in it, e.g. \(directory)/control.sock")
        expectError(header + "proxy:\n  control_socket: /run/pinproxy/\n", line: 5, column: 19,
                    "proxy.control_socket names a directory ('/run/pinproxy/')")
    }

    @Test func aPathTooLongForASocketAddressIsALoadError() {
        let long = "/" + String(repeating: "a", count: 107)
        expectError(header + "proxy:\n  control_socket: \(long)\n", line: 5, column: 19,
                    "proxy.control_socket is 108 bytes long; a Unix socket path holds at most 107")
        #expect((try? load(header + "proxy:\n  control_socket: \(long.dropLast())\n").get().proxy.controlSocket) == String(long.dropLast()))
    }
}
