section .rodata
    city db "Paris", 0
section .text
    push city
    call get_temperature
    cmp eax, 18               ; result in eax
    pop ebx                   ; and the result again?
    jl cold
    hlt
cold:
    push 3
    call set_heater
