//go:build e2e

package e2e

// The fixed host ports the e2e tests publish, a hundred per test and no
// port in two tests: .ci/run runs TestE2EResume beside TestE2E and then
// TestE2EContainerd, TestE2EArm64 beside TestE2EContainerd and
// TestE2ESandbox, and a port one instance's forwarder still holds must
// never be the one another test waits on. Ports a check can take from the OS (the domains
// router's, the corporate network's) are not here.
//
//	TestE2E            18080-18099  web 18080, UDP 18081 (checkPorts, the IPv6 checks), echo 18082
//	                                (checkParallelStreams), downloadPort 18083, leakProbePort 18084
//	                                (netstack_test.go), reconnectPort, guest-loopback 18097-18099
//	TestE2EResume      18100-18199  resumeWebPort, the idle pause's echo server 18123-18125, freezeEchoPort 18130,
//	                                migrateWebPort
//	TestE2EContainerd  18200-18299  nerdctlWebPort
//	TestE2EArm64       18300-18399  arm64WebPort
//	TestE2EMac         18400-18499  macWebPort
//	TestE2ESandbox     18500-18599  sandboxWebPort (sandbox_linux_test.go)
const (
	// reconnectPort is the published port checkAgentReconnect watches.
	reconnectPort = 18090
	// resumeWebPort must answer again after the resume, with no new run.
	resumeWebPort = 18195
	// migrateWebPort is the port of the container checkMigrate brings
	// from a host dockerd.
	migrateWebPort = 18150
	nerdctlWebPort = 18290
	arm64WebPort   = 18380
	macWebPort     = 18480
)
