# Loads a Homebrew formula against a stub Formula class (no Homebrew here)
# and checks what vmdock's must do: state its license, macOS 13 and Apple
# silicon, build the tag's source tarball with Go,
# pass the version, the release's image URL and manifest digest to make,
# install bin/vmdock with shell completions, and test the installed binary.
#
# usage: ruby hack/ci/formula_test.rb Formula/vmdock.rb
# Exit status 0 when every check passes; each failure is printed.

require "pathname"

# What the class-level DSL and install recorded.
class Formula
  class << self
    attr_reader :dsl

    def record(key, value)
      (@dsl ||= Hash.new { |h, k| h[k] = [] })[key] << value
    end

    %i[desc homepage url sha256 license head depends_on].each do |m|
      define_method(m) { |*args, **kw| record(m, kw.empty? ? args : args + [kw]) }
    end

    def test(&block)
      record(:test, block)
    end
  end

  # A stable build from the url's tag.
  Build = Struct.new(:head) do
    def head?
      head
    end
  end

  # bin/"vmdock" and bin.install, recorded.
  class Bin
    attr_reader :installed

    def initialize
      @installed = []
    end

    def install(*files)
      @installed.concat(files)
    end

    def /(other)
      Pathname.new("/stub/bin") / other
    end
  end

  attr_reader :systems, :completions, :bin

  def initialize
    @systems = []
    @completions = []
    @bin = Bin.new
  end

  def build
    Build.new(false)
  end

  def homepage
    self.class.dsl[:homepage].first.first
  end

  # Homebrew's version from a tag tarball named v1.2.3.tar.gz: 1.2.3.
  def version
    self.class.dsl[:url].first.first[%r{/v([0-9][^/]*)\.tar\.gz\z}, 1]
  end

  def system(*args)
    @systems << args
  end

  def generate_completions_from_executable(*args, **kw)
    @completions << [args, kw]
  end
end

$failures = []
def check(what, ok)
  puts "#{ok ? 'ok  ' : 'FAIL'} #{what}"
  $failures << what unless ok
end

path = ARGV.fetch(0) { abort "usage: ruby #{$PROGRAM_NAME} FORMULA" }
load path
klass = Object.const_get(File.basename(path, ".rb").split(/[-_]/).map(&:capitalize).join)
dsl = klass.dsl

url = dsl[:url].first&.first.to_s
m = %r{\Ahttps://github\.com/([A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)/archive/refs/tags/(v[0-9][^/]*)\.tar\.gz\z}.match(url)
check("url is a GitHub tag's source tarball (#{url})", !m.nil?)
repo, tag = m ? m.captures : [nil, nil]
check("homepage is that repository", dsl[:homepage].first&.first == "https://github.com/#{repo}")
check("sha256 is 64 hex digits", dsl[:sha256].first&.first.to_s.match?(/\A\h{64}\z/))
check("depends_on \"go\" => :build", dsl[:depends_on].include?([{ "go" => :build }]))
check("depends_on macos: :ventura", dsl[:depends_on].include?([{ macos: :ventura }]))
check("depends_on arch: :arm64 (Homebrew has no Intel Macs)", dsl[:depends_on].include?([{ arch: :arm64 }]))
check("license \"Apache-2.0\"", dsl[:license].first == ["Apache-2.0"])
check("a test block", !dsl[:test].empty?)

f = klass.new
f.install
make = f.systems.find { |args| args.first == "make" }
check("install runs make build", !make.nil? && make[1] == "build")
make ||= []
check("make gets VERSION=#{tag}", make.include?("VERSION=#{tag}"))
base = "https://github.com/#{repo}/releases/download/#{tag}/"
check("make gets IMAGE_BASE_URL=#{base}", make.include?("IMAGE_BASE_URL=#{base}"))
pin = make.find { |a| a.start_with?("IMAGE_MANIFEST_SHA256=") }.to_s.delete_prefix("IMAGE_MANIFEST_SHA256=")
check("make gets IMAGE_MANIFEST_SHA256 as 64 hex digits", pin.match?(/\A\h{64}\z/))
check("installs bin/vmdock", f.bin.installed.include?("bin/vmdock"))
args, kw = f.completions.first
check("completions from `vmdock completion`",
      !args.nil? && args[0].to_s == "/stub/bin/vmdock" && args[1] == "completion")
shells = (kw || {}).fetch(:shells, %i[bash zsh fish])
check("completions for bash, zsh and fish", (%i[bash zsh fish] - shells).empty?)

if $failures.empty?
  puts "#{path}: all checks passed"
else
  warn "#{path}: #{$failures.size} check(s) failed"
  exit 1
end
