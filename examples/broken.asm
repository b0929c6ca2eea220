; A plan with two mistakes, on purpose, to show what `llassembly check` reports:
;   llassembly check examples/broken.asm --tools examples.weather_tools:TOOLS
    PUSH "Paris"
    CALL get_temprature         ; a typo in the tool's name
    POP R1
    CMP R1, 20
    JG warm                     ; no such label
    HLT
