import Testing
@testable import ProxyCore
@testable import TLSInspection
import PinPolicy
@Test func zzSizes() {
    print("SIZES ClientFlightReader", MemoryLayout<ClientFlightReader>.size, "ServerFlightReader", MemoryLayout<ServerFlightReader>.size,
          "Context", MemoryLayout<StreamCheck.Context>.size, "Phase", MemoryLayout<StreamCheck.Phase>.size, "RecordHeaderWalk", MemoryLayout<RecordHeaderWalk>.size,
          "StreamSummary", MemoryLayout<StreamSummary>.size, "Pinning", MemoryLayout<StreamCheck.Context.Pinning>.size, "PolicySnapshot", MemoryLayout<PolicySnapshot>.size,
          "RelaySide", MemoryLayout<Relay.Side>.size, "ClientHello", MemoryLayout<ClientHello>.size, "Hellos", MemoryLayout<StreamCheck.Hellos>.size)
}
